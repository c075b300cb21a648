"""Client side of the reward service: HTTP client, framework integrations, GRPO trainer."""

__all__: list[str] = []
