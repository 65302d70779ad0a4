/**
 * @module failure/validate
 * Checking a step's output against a Standard Schema (zod, valibot, arktype…): the validated
 * value (after the schema's transforms and defaults) or an {@link OutputInvalidError} with the
 * schema's issues and the output that was refused, which the step's repair budget may retry.
 */
import { InvalidArgumentError, OutputInvalidError, type OutputIssue } from '../errors.ts';
import type { StandardResult, StandardSchemaLike } from '../api/step.ts';

export function isStandardSchema(v: unknown): v is StandardSchemaLike {
  return typeof v === 'object' && v !== null && typeof (v as { '~standard'?: { validate?: unknown } })['~standard']?.validate === 'function';
}

function issuesOf(result: Extract<StandardResult, { issues: unknown }>): OutputIssue[] {
  return result.issues.map((i) => {
    const issue: OutputIssue = { message: i.message };
    if (i.path?.length) {
      issue.path = i.path.map((p) => {
        const key = typeof p === 'object' && p !== null ? p.key : p;
        return typeof key === 'number' ? key : String(key);
      });
    }
    return issue;
  });
}

/**
 * The value `schema` makes of `value`; throws {@link OutputInvalidError} (named after `stepName`)
 * with the issues when it does not match.
 * @example
 * const draft = await validateOutput(Draft, JSON.parse(text), 'draft');
 */
export async function validateOutput(schema: StandardSchemaLike, value: unknown, stepName: string): Promise<unknown> {
  if (!isStandardSchema(schema)) throw new InvalidArgumentError(`The output schema of step "${stepName}" is not a Standard Schema (it needs ~standard.validate; zod 3.24+ has it).`);
  const result = await schema['~standard'].validate(value);
  if (result.issues) throw new OutputInvalidError(stepName, issuesOf(result), value);
  return result.value;
}
