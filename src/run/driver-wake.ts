/**
 * @module run/driver-wake
 * Internal: not part of the public API (the package exports only its index modules).
 * What ends a run driver's wait (see `TaskRun`): the run can only wait (idle), it halted, or its
 * code settled; for the grace period after a halt, its timer too. One promise for them all, made
 * when the run starts, again when a kept run is resumed, and for the grace period: a run in flight
 * holds one promise for its driver, not one per cause and a race between them (a young collection
 * copies what every run in flight holds).
 */
import { withResolvers } from '../resolvers.ts';

export class DriverWake {
  /** Resolves at the next {@link wake} after it was made (see {@link renew}). */
  promise!: Promise<void>;
  #resolve!: () => void;
  /** The run can only wait (or was asked to stop and is quiet). */
  idle = false;
  /** The run halted: the first halt's signal fired. */
  halted = false;

  constructor() {
    this.renew();
  }

  /** A fresh {@link promise}, for the driver's next wait. */
  renew(): void {
    ({ promise: this.promise, resolve: this.#resolve } = withResolvers<void>());
  }

  /** A new run of the same code (a kept run resumed): neither idle nor halted, and a fresh promise. */
  reset(): void {
    this.idle = false;
    this.halted = false;
    this.renew();
  }

  /** Ends the driver's wait. */
  wake(): void {
    this.#resolve();
  }

  /** The run can only wait (or was asked to stop and is quiet): the driver ends it. */
  becameIdle(): void {
    this.idle = true;
    this.#resolve();
  }

  /** The run's first halt: the driver gives the code its grace period. */
  haltedNow(): void {
    this.halted = true;
    this.#resolve();
  }
}
