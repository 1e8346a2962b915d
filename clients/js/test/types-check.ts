// Compiled by `npm run typecheck` (tsc --noEmit), never run: the declarations
// in src/index.d.ts must describe the API as the tests and README use it.
import { HarnessClient, RpcError, ErrorCodes, isEvent, type SessionEvent, type PromptResult } from '../src/index.js';

export async function example(url: string): Promise<PromptResult> {
  const client = new HarnessClient(url, { token: 't', initialize: { approvalPolicy: 'ask' } });
  const init = await client.connect({ retry: true });
  const methods: string[] = init.capabilities.methods;
  client.on('event', ({ sessionId, event }) => {
    if (event.type === 'assistant/chunk' && event.data.chunk.type === 'text-delta') {
      const text: string = event.data.chunk.text;
      void [sessionId, text];
    }
  });
  const turn = client.prompt('demo', 'hello');
  for await (const event of turn) {
    const e: SessionEvent = event;
    if (e.type === 'approval/requested') await client.approve('demo', e.data.approvalId, 'allowed-once');
    if (e.type === 'turn/end') void e.data.reason.kind;
  }
  try {
    await client.call('session/prompt', { sessionId: 'demo', contentBlocks: [{ type: 'text', text: 'x' }] });
  } catch (err) {
    if (err instanceof RpcError && err.code === ErrorCodes.SESSION_BUSY) void err.data;
  }
  const unknown: unknown = JSON.parse('{}');
  if (isEvent(unknown)) void unknown.seq;
  void methods;
  return turn.result;
}
