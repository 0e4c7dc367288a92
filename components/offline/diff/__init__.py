"""The diff of two plans: what changed, and what a real `pulumi preview` and `pulumi up` would do
about it (updates, replacements, what they put at risk)."""
