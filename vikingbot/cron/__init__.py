"""cron."""
