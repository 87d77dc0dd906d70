"""Skills: ``SKILL.md`` folders the agent loads when it needs them (docs/skills.md).

A skill is a folder ``<name>/SKILL.md`` (YAML front matter with ``name`` and
``description``, then a Markdown body) under the user's ``<home>/skills`` or a
workspace's ``<workspace>/skills`` (the workspace's wins). What this package owns:

- ``frontmatter``: the total, capped front-matter parser (a strict YAML subset);
- ``discover``: reading both folders into a ``Catalog`` (problems named, never
  raised), cached on the identity of the folders and files;
- ``starters``: the starter skills shipped in ``starters/``, copied on first start;
- ``prompt``: the listing the system prompt carries, and a skill's text for a
  heartbeat turn;
- ``tool``: the read-only ``skill`` tool (``vikingbot.tools`` entry point).

A skill is text the model reads, never configuration: nothing in a skill folder
is executed, and no front-matter field changes what a turn may run.

Import from the modules themselves; this package re-exports nothing.
"""
