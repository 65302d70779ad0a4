// The messages of the payload bench's chat loop, shared by Stepwise's workflow and the peers: turn
// t adds a user message and an assistant reply of ~1 KB each, words picked by a small LCG (text
// that compresses as prose does, not to nothing).
const WORDS = ['agent', 'tool', 'result', 'latency', 'invoice', 'customer', 'refund', 'policy', 'search', 'answer', 'draft', 'review', 'model', 'token', 'budget', 'report', 'quarter', 'region', 'growth', 'churn'];

export function prose(seed, chars) {
  let x = seed * 2654435761 + 1;
  let s = '';
  while (s.length < chars) {
    x = (x * 1103515245 + 12345) >>> 0;
    s += `${WORDS[x % WORDS.length]}${x % 7 === 0 ? `-${x % 1000}` : ''} `;
  }
  return s;
}

export function turnMessages(t) {
  return [
    { role: 'user', content: prose(2 * t, 1000) },
    { role: 'assistant', content: prose(2 * t + 1, 1000) },
  ];
}
