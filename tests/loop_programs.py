"""Functions shared by test modules in different folders (a test module imports no other
folder's test module: each folder is its own import root)."""
import numpy as np


def appended_each_time(x):
    """`h` gains an element every iteration (a join with a loop-carried array)."""
    h = x
    acc = 0.0
    for k in range(3):
        h = np.concatenate((h, h[:1] * 0.5))
        acc += np.sum(np.sin(h)) * (k + 1.0)
    return acc
