"""The deployer policy: the IAM policy of the identity that runs `pulumi up`, derived from the plan."""
