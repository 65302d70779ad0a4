export * from '../store/approval-rows.ts';
