"""systems/kafka"""
