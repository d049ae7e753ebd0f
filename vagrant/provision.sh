#!/usr/bin/env bash
# Provisions one lab VM (libvirt, VirtualBox): what a Kafka broker and Gregor's
# faults need, and the SSH host key the Vagrantfile made for this node on the
# controller (so Gregor can check it). Kafka's jars are uploaded by Gregor over
# SSH from its Maven cache; a VM never fetches anything but Debian packages,
# and only those it lacks. The docker provider's nodes need none of this.
set -euo pipefail
echo "gregor: provisioning $1 ($2)"

need=()
for pair in java:openjdk-17-jre-headless python3:python3 iptables:iptables tc:iproute2 ss:iproute2 \
            kill:procps setsid:util-linux sha256sum:coreutils; do
  command -v "${pair%%:*}" > /dev/null 2>&1 || need+=("${pair#*:}")
done
if [ "${#need[@]}" -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

# The host key Gregor expects (made by the Vagrantfile in .vagrant/gregor/<node>/).
if [ -f /tmp/gregor-ssh/ssh_host_ed25519_key ]; then
  install -m 600 /tmp/gregor-ssh/ssh_host_ed25519_key /etc/ssh/ssh_host_ed25519_key
  install -m 644 /tmp/gregor-ssh/ssh_host_ed25519_key.pub /etc/ssh/ssh_host_ed25519_key.pub
  rm -rf /tmp/gregor-ssh
  systemctl reload ssh 2> /dev/null || systemctl reload sshd 2> /dev/null || true
fi
