/**
 * Fake providers for one test file: each is closed after the test that started it.
 */
import { afterEach } from "vitest";
import { createProviderAdapter, type ProviderAdapter, type ProviderName } from "../../src/providers/index.js";
import { type FakeProvider, type FakeTurn, startFakeProvider } from "../fakes/provider-server.js";

/**
 * Registers the closing (an afterEach of the calling file) and returns `setup(name, script)`, which starts a fake
 * provider speaking `name`'s wire protocol with `script` and gives an adapter pointed at it (the official SDK, key
 * "test-key"), and `track(fake)`, which closes a fake started otherwise.
 */
export function fakeProviders(): {
  setup(name: ProviderName, script: FakeTurn[]): Promise<{ fake: FakeProvider; adapter: ProviderAdapter }>;
  track(fake: FakeProvider): FakeProvider;
} {
  let started: FakeProvider[] = [];
  afterEach(async () => {
    await Promise.all(started.map((f) => f.close()));
    started = [];
  });
  const track = (fake: FakeProvider) => {
    started.push(fake);
    return fake;
  };
  return {
    track,
    async setup(name, script) {
      const fake = track(await startFakeProvider(name, script));
      return { fake, adapter: createProviderAdapter(name, { apiKey: "test-key", baseURL: fake.baseURL }) };
    },
  };
}
