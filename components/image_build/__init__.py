"""``python -m rlinf_eks build-image``: the training image built in the stack's account.

    context     the build context of one family, zipped deterministically, and the image tag
    build       one build through the stack's CodeBuild project (boto3 clients passed in)
    stack_file  workload.image written into a stack file, one line changed
    cli         the command: the stack's settings, the clients, the messages and exit status
"""
