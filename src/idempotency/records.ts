export * from '../store/idempotency.ts';
