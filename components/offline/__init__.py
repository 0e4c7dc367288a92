"""Running the program with no Pulumi CLI and no cloud: stack files, mocks, the offline plan, diffs."""
