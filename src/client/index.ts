/**
 * @module stepwise-engine/client
 * The page side of Stepwise: a dependency-free client of the HTTP API (`StepwiseClient`: start,
 * read, signal, cancel, decide, and follow a task's tokens with reconnection), and a chat
 * transport for the AI SDK's `useChat` (`StepwiseChatTransport`) that talks to a chat task written
 * with `chatMessages` of `stepwise-engine/ai`. Nothing of the engine is imported: a bundler ships
 * only this code to the browser.
 */
export { StepwiseClient, StepwiseHttpError } from './client.ts';
export type { ClientOptions, StreamFrame, LogEntry, StreamOptions, StreamItem } from './client.ts';
export { StepwiseChatTransport } from './chat-transport.ts';
export type { StepwiseChatTransportOptions, ChatSessionStore } from './chat-transport.ts';
export type { ChatMessage } from '../chat-protocol.ts';
