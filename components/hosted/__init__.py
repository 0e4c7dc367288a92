"""The components as a Pulumi component package: usable from TypeScript, YAML, Go, C#, Java.

``provider/`` at the repository's root is the plugin (``PulumiPlugin.yaml``, runtime python); its
``__main__.py`` calls :func:`rlinf_eks.hosted.provider.serve`, which hosts the classes of
:mod:`.components` and :mod:`.stack` through the Pulumi SDK's component provider. The SDK infers
the package schema from their annotations: each takes one ``args`` TypedDict (:mod:`.args`), each
field's docstring its description.

One source of truth: :mod:`.args` is generated from the pydantic settings
(``python -m rlinf_eks.hosted.generate``; ``tests/test_hosted_schema.py`` fails while it is
stale), every field ``NotRequired``, so that types, descriptions and defaults stay in
``rlinf_eks.config``; what another language sends is validated by the same models and rules
(:mod:`.inputs`) and a bad value fails with the loader's lines, one per problem, each naming the
property.

    hosted type                     Python API it builds          settings properties
    EfaGpuNodeGroup                 rlinf_eks.EfaGpuNodeGroup     gpuNodes
    DevicePlugins                   rlinf_eks.DevicePlugins       devicePlugins, gpuNodes
    KubeRayOperator                 rlinf_eks.KubeRayOperator     kuberay
    RlinfTraining                   rlinf_eks.RlinfTraining       TrainingSettings' sections
    RlinfStack                      rlinf_eks.program.build       every StackSettings section

Each hosted class is a subclass of the Python component (the same type token, name and children),
so a program in another language plans exactly the resources a Python program plans.
"""
