import sys, time
import ray

nodes_wanted, gpus_per_node, timeout = (int(a) for a in sys.argv[1:4])
head = sys.argv[4]
gpus_wanted = nodes_wanted * gpus_per_node
ray.init(address="auto", logging_level="ERROR", log_to_driver=False)
deadline = time.monotonic() + timeout
while True:
    alive = [n for n in ray.nodes() if n.get("Alive")]
    gpus = int(ray.cluster_resources().get("GPU", 0))
    if len(alive) >= nodes_wanted and gpus >= gpus_wanted:
        print(f"rlinf-eks: Ray cluster ready: {len(alive)} nodes, {gpus} GPUs", flush=True)
        break
    if time.monotonic() > deadline:
        sys.exit(
            f"rlinf-eks: the Ray cluster did not form within {timeout}s: {len(alive)} of {nodes_wanted} "
            f"nodes and {gpus} of {gpus_wanted} GPUs joined. Check that every pod of the Job is Running "
            f"(kubectl get pods -l app.kubernetes.io/component=manual-ray), that the GPU node group has "
            f"{nodes_wanted} ready nodes, and that the workers reach {head}."
        )
    # one GCS query a second: the trainer starts within a second of the last node joining
    time.sleep(1)
ray.shutdown()
