(import 'maintenance.libsonnet') +
(import 'interruptions.libsonnet') +
(import 'system.libsonnet')
