"""numba (with llvmlite, 200 MB) compiles AReaL's sequence packing; the tests' batches are not packed: its functions
run as Python."""


def njit(*args, **kwargs):
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return lambda function: function
