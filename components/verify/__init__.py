"""``python -m rlinf_eks verify STACK``: prove a deployed cluster ready before a run spends GPU
hours, as a ladder of levels (:data:`.model.LEVELS`), each run only when the levels below passed:

0. control plane (:mod:`.control_plane`): the API, its minor, the caller, the CRDs;
1. nodes (:mod:`.nodes`): the GPU nodes' count, type, allocatable GPUs, EFA and hugepages,
   taints, labels, health;
2. add-ons (:mod:`.addons`): the device plugins on every GPU node, the controllers, the queue,
   the namespace, service account and shared-filesystem claim;
3. node smoke (:mod:`.smoke`): one short Job per GPU node in the training image: the run's image
   and fabric checks, ``nvidia-smi``, a headless render for simulator dialects;
4. fabric across nodes (:mod:`.fabric`, :mod:`.nccl`): NCCL all-reduce over the GPU pool;
5. admission (:mod:`.admission`): the run's gang fits the live nodes and the queue's quota.

The checks are pure functions of what the stack expects (:mod:`.expect`) and what was observed
(:class:`.model.Observed`); :mod:`.client` is the one module that talks to a cluster, and
:mod:`.runner` climbs the ladder. :mod:`.cli` is the command.
"""
