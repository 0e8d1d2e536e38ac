/**
 * Types for the prom-client modules Toolhost imports one by one (its index also loads default process metrics, the
 * Pushgateway client and cluster support, which cost every short-lived CLI process startup time and are not used).
 */
declare module "prom-client/lib/registry.js" {
  import type { Registry } from "prom-client";

  const RegistryClass: typeof Registry;
  export default RegistryClass;
}
declare module "prom-client/lib/counter.js" {
  import type { Counter } from "prom-client";

  const CounterClass: typeof Counter;
  export default CounterClass;
}
declare module "prom-client/lib/gauge.js" {
  import type { Gauge } from "prom-client";

  const GaugeClass: typeof Gauge;
  export default GaugeClass;
}
