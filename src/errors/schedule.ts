/**
 * @module errors/schedule
 * Errors of schedules (`engine.schedules`).
 */
import { ERROR_CODES } from './codes.ts';
import { StepwiseError } from './base.ts';

/** No schedule has this id. */
export class ScheduleNotFoundError extends StepwiseError {
  readonly scheduleId: string;
  constructor(scheduleId: string) {
    super(ERROR_CODES.NOT_FOUND, `No schedule with id "${scheduleId}". List them with engine.schedules.list() or \`stepwise schedules ls\`.`);
    this.name = 'ScheduleNotFoundError';
    this.scheduleId = scheduleId;
  }
}
