# Growing the C arrays the compiled parts keep (a pxd of inline functions: nothing to build).

from libc.stdlib cimport realloc


cdef inline int regrow(void** memory, Py_ssize_t size) except -1:
    """``memory[0]`` reallocated to ``size`` bytes; ``MemoryError`` (and ``memory[0]`` as
    it was) when it cannot be."""
    cdef void* grown = realloc(memory[0], size)
    if grown == NULL:
        raise MemoryError()
    memory[0] = grown
    return 0


cdef inline int reserve(char** memory, Py_ssize_t* capacity, Py_ssize_t need,
                        Py_ssize_t least) except -1:
    """Room for ``need`` bytes in ``memory[0]`` (``capacity[0]`` of them now): doubled, and
    at least ``least``, when it is short."""
    if need > capacity[0]:
        need = max(need, 2 * capacity[0], least)
        regrow(<void**>memory, need)
        capacity[0] = need
    return 0
