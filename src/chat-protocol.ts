/**
 * @module chat-protocol
 * Internal: not part of the public API (the package exports only its index modules).
 * How a chat page and a chat task speak, shared by the workflow side (`chatMessages` of
 * `stepwise-engine/ai`) and the page side (`StepwiseChatTransport` of `stepwise-engine/client`): a
 * user's message reaches the task as the signal {@link CHAT_MESSAGE_SIGNAL} (payload
 * {@link ChatMessage}, idempotency key `chat-message:<id>` so a resent message counts once), and
 * the task answers it in the step named by {@link replyStep}, whose stream frames the page shows.
 */

/** The signal that carries a user's message to a chat task. */
export const CHAT_MESSAGE_SIGNAL = 'chat:message';

/** A message of a chat's transcript. */
export interface ChatMessage {
  /** The page's id of the message (the AI SDK's `UIMessage.id`). */
  id: string;
  role: 'user' | 'assistant';
  text: string;
}

/** The name of the step that answers the user's message `messageId`. */
export const replyStep = (messageId: string): string => `reply:${messageId}`;

/** The signal's idempotency key for the user's message `messageId`. */
export const messageKey = (messageId: string): string => `chat-message:${messageId}`;
