"""Alert rules, their lifecycle and webhook delivery (docs/alerts.md)."""
