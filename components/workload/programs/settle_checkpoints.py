import sys

# settle_checkpoint_writes: programs/checkpoint_writes.py, included before this program
root, budget, quiet, marker = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
print(settle_checkpoint_writes(root, budget, quiet, marker))
