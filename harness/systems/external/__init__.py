"""systems/external: a cluster someone else runs"""
