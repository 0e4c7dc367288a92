import sys, time

# newest_checkpoint_write: programs/checkpoint_writes.py, included before this program
root, budget = sys.argv[1], int(sys.argv[2])
deadline = time.monotonic() + budget

# every 5 s at most: a walk stats every file of every kept checkpoint (metadata operations on FSx)
while time.monotonic() < deadline and time.time() - newest_checkpoint_write(root) < 30:
    time.sleep(max(0.0, min(5.0, deadline - time.monotonic())))
