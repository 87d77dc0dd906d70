// vikingbot dashboard: the bell. One EventSource per page; on each reading the
// unread count is updated and a "bell" event is fired on <body>, which lists
// (inbox, chat) use as their htmx refresh trigger. No inline script anywhere.
(function () {
  "use strict";
  var url = document.body.getAttribute("data-events");
  var count = document.getElementById("bell-count");
  if (!url || !count || !window.EventSource) { return; }
  // the reading the page was rendered with: a first live reading that differs means
  // something arrived while the page loaded, so the live lists refresh at once
  var last = document.body.getAttribute("data-seen") || "";
  var source = new EventSource(url);
  source.addEventListener("bell", function (ev) {
    var parts = String(ev.data).split(" ");
    var unread = parseInt(parts[0], 10) || 0;
    count.textContent = String(unread);
    count.classList.toggle("zero", unread === 0);
    document.title = document.title.replace(/^\(\d+\) /, "");
    if (unread > 0) { document.title = "(" + unread + ") " + document.title; }
    if (last !== ev.data) {
      document.body.dispatchEvent(new CustomEvent("bell", { bubbles: true }));
    }
    last = ev.data;
  });
  window.addEventListener("pagehide", function () { source.close(); });
})();

// the chat log: newest message in view when the page loads (also after a send, which
// reloads the page) and whenever the bell swaps in a new log
(function () {
  "use strict";
  function toEnd(log) { log.scrollTop = log.scrollHeight; }
  var log = document.getElementById("chat-log");
  if (!log) { return; }
  toEnd(log);
  document.body.addEventListener("htmx:afterSwap", function (ev) {
    if (ev.target && ev.target.id === "chat-log") { toEnd(ev.target); }
  });
})();
