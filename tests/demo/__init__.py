"""The demo graph generator (not installed: the package ships only its output)."""
