"""The engine core: pure, clock-injected KV management, admission and scheduling."""
