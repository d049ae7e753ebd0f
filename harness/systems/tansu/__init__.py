"""systems/tansu: Tansu over PostgreSQL (or one broker's memory)"""
