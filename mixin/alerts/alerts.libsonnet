(import 'maintenance.libsonnet') +
(import 'interruptions.libsonnet') +
(import 'system.libsonnet') +
(import 'repair.libsonnet') +
(import 'hosts.libsonnet') +
(import 'upgrades.libsonnet') +
(import 'gpu.libsonnet')
