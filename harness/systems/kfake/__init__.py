"""systems/kfake: franz-go's kfake in a small Go program of ours"""
