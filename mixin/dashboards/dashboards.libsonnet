(import 'fleet.libsonnet') +
(import 'node-pool.libsonnet') +
(import 'actions.libsonnet')
