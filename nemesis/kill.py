"""SIGKILL of brokers, and their restart.

A kill loses whatever the broker had not flushed or replicated; with
acks=1 that includes writes it already acknowledged.
"""

from __future__ import annotations


def kill_nodes(lab, names) -> list[str]:
    done = []
    for name in names:
        lab.node(name).kill()
        done.append(name)
    return done


def start_nodes(lab, names) -> list[str]:
    """Starts the brokers that are dead (a paused one is resumed instead,
    so a heal never leaves a broker stopped)."""
    done = []
    for name in names:
        node = lab.node(name)
        state = node.state()
        if state == "dead":
            lab.start_node(name)
            done.append(name)
        elif state == "paused":
            node.resume()
            done.append(name)
    return done
