"""The engine: the very program `pulumi up` runs, in-process under Pulumi's mocks, fed the stack
files and `--set` edits as the Pulumi CLI would hand them over."""
