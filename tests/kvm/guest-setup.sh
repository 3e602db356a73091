#!/bin/sh
# Runs inside the guest's root file system as it is made (tests/releases/chroot.sh, kind
# guest): a machine that boots straight to its test agent. The agent mounts the host's two 9p
# shares (`share`: the test's mailbox folder; `src`: the source and build tree, read-only, at the
# path the host gives on the kernel command line as composer.src=) and runs each
# <share>/cmd/<N>.sh it finds, as root, writing <N>.out and then <N>.rc. Commands run side by
# side (a test keeps a drive open in one while it runs the release in another).
set -eu

echo guest >/etc/hostname
passwd -d root >/dev/null
printf '/dev/vda / ext4 rw,relatime 0 1\n' >/etc/fstab
# Packages started nothing while the file system was made; at boot everything may start.
rm -f /usr/sbin/policy-rc.d

# The guest's network (QEMU's user networking: the host is 10.0.2.2) from its DHCP.
mkdir -p /etc/systemd/network
printf '[Match]\nName=en* eth*\n[Network]\nDHCP=ipv4\n' >/etc/systemd/network/50-user.network
systemctl enable systemd-networkd >/dev/null 2>&1

cat >/usr/local/sbin/composer-agent <<'AGENT'
#!/bin/sh
set -u
src=$(sed -n 's/.*composer\.src=\([^ ]*\).*/\1/p' /proc/cmdline)
opts=trans=virtio,version=9p2000.L,msize=262144
# udev may not have bound the 9p transport to its virtio device yet.
modprobe 9pnet_virtio
mkdir -p /mnt/share
i=0
until mount -t 9p -o "$opts" share /mnt/share; do
  i=$((i + 1))
  [ $i -lt 60 ] || exit 1
  sleep 1
done
if [ -n "$src" ]; then
  mkdir -p "$src"
  mount -t 9p -o "$opts,ro" src "$src" || exit 1
fi
mkdir -p /mnt/share/cmd
cat /proc/uptime >/mnt/share/agent-ready.tmp && mv /mnt/share/agent-ready.tmp /mnt/share/agent-ready
cd /mnt/share/cmd || exit 1
while :; do
  for f in *.sh; do
    [ -e "$f" ] || continue
    n=${f%.sh}
    mv "$f" "$n.run"
    (bash "$n.run" >"$n.out" 2>&1; echo $? >"$n.rc.tmp"; mv "$n.rc.tmp" "$n.rc") &
  done
  sleep 0.1
done
AGENT
chmod 755 /usr/local/sbin/composer-agent
cat >/etc/systemd/system/composer-agent.service <<'UNIT'
[Unit]
Description=slurm-composer test agent
DefaultDependencies=no
After=systemd-udevd.service local-fs.target
Wants=systemd-udevd.service

[Service]
ExecStart=/usr/local/sbin/composer-agent
KillMode=process

[Install]
WantedBy=sysinit.target
UNIT
systemctl enable composer-agent.service >/dev/null 2>&1

# What a test starts itself (munged with the harness's key, slurmd), and what only slows a
# guest that lives for minutes under TCG.
systemctl mask munge.service slurmd.service apt-daily.timer apt-daily-upgrade.timer \
  man-db.timer e2scrub_all.timer e2scrub_reap.service fstrim.timer systemd-timesyncd.service \
  getty@tty1.service >/dev/null 2>&1 || true
systemctl set-default multi-user.target >/dev/null 2>&1
