/**
 * @module stepwise-engine/testing
 * Tools for testing workflows: a manual clock for hour-long waits in milliseconds.
 */
export { ManualClock } from './manual-clock.ts';
