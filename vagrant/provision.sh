#!/usr/bin/env bash
# Provisions one lab VM: the packages a Kafka broker and Gregor's faults need.
# Kafka's jars are copied over by the controller (from its Maven cache), so a
# VM never needs to reach anything but the Debian mirror.
set -euo pipefail
node_name=$1
node_ip=$2

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
  openjdk-17-jre-headless iptables iproute2 procps psmisc rsync

install -d -m 0755 /opt/gregor /var/lib/gregor
echo "$node_name $node_ip" > /etc/gregor-node
# The controller logs in as root with its own key (see vagrant/README.md).
install -d -m 0700 /root/.ssh
