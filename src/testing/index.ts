/**
 * @module stepwise-engine/testing
 * Tools for testing workflows: a manual clock for hour-long waits in milliseconds, and
 * `checkResume`, which crashes a workflow's worker at every step boundary and checks that a new
 * worker finishes the task as if nothing had happened.
 */
export { ManualClock } from '../manual-clock.ts';

// Crash at every step boundary
export { checkResume, type CheckResumeOptions, type RunSetup } from './check-resume.ts';
export {
  ResumeCheckError,
  isResumeCheckError,
  type CrashPoint,
  type CrashPointResult,
  type ResumeFailure,
  type ResumeReport,
  type JournalCall,
  type StepAttempt,
  type TaskOutcome,
  type WriteInfo,
} from './resume-report.ts';
export type { ApprovalAnswer, TaskWait } from './world.ts';

// Replay a recorded task against the current code
export { checkReplay, ReplayCheckError, isReplayCheckError, type CheckReplayOptions, type ReplayReport, type DriftedCall } from './check-replay.ts';
export { checkDrift, type DriftReport, type TaskDrift } from './check-drift.ts';

// Declarative fault injection: failing and hanging steps, model errors, a store that goes away
export { faultPlan, FaultPlan, type Fault, type StepFault, type ModelFault, type StoreFault } from './faults.ts';
