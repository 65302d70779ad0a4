// A language model for tests of stepwise-engine/ai (the AI SDK's MockLanguageModelV3): it answers
// `<prefix>answer <n>` (n counts its calls) and records the prompt of each call.
import { MockLanguageModelV3 } from 'ai/test';

export function fakeModel(id: string, prefix = ''): { model: MockLanguageModelV3; prompts: string[] } {
  const prompts: string[] = [];
  const model = new MockLanguageModelV3({
    modelId: id,
    doGenerate: async (options) => {
      prompts.push(JSON.stringify(options.prompt));
      return {
        content: [{ type: 'text' as const, text: `${prefix}answer ${prompts.length}` }],
        finishReason: { unified: 'stop' as const, raw: undefined },
        usage: { inputTokens: { total: 5, noCache: 5, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 2, text: 2, reasoning: 0 } },
        warnings: [],
      };
    },
  });
  return { model, prompts };
}
