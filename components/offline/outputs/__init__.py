"""The plan's outputs: plan.json and the manifests, and the sections computed from them (efficiency,
storage budget, first step, inputs, queue, faults), printed and written into the plan folder."""
