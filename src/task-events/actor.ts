/**
 * @module task-events/actor
 * Who did what a log entry says: a user, a worker or the system (a timeout policy, a sweep).
 */
import type { ActorKind } from '../store.ts';

/** Who caused an event: a person or API client, a worker process, or the engine itself. */
export interface Actor {
  kind: ActorKind;
  id: string;
}
