// Debian's Chromium driven by playwright-core, for the dashboard tests. Without /usr/bin/chromium
// the browser tests are skipped with a message; under CI=true that is an error (.ci/run installs it).
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';
export const ARTIFACTS = join(new URL('../..', import.meta.url).pathname, 'test-artifacts');

export function chromiumAvailable(): boolean {
  if (existsSync(CHROMIUM)) return true;
  if (process.env.CI === 'true') throw new Error(`Chromium is missing at ${CHROMIUM}: CI must install it (.ci/run ensure_chromium).`);
  console.warn(`[stepwise tests] No Chromium at ${CHROMIUM}: the dashboard browser tests are skipped (apt-get install chromium).`);
  return false;
}

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

export function artifactPath(name: string): string {
  mkdirSync(ARTIFACTS, { recursive: true });
  return join(ARTIFACTS, name);
}
