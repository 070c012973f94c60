"""The built-in gates, one module each; `gates.registry` lists them once."""
