"""CI glue: the GPU matrix, the pytest plugin and its GPU allocator.
"""
