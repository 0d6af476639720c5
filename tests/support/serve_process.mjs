// `gpt-vk serve` as a child process for the node tests (tests/*.mjs): started on a free
// loopback port with the validation layer on, its port read from the "listening on" line,
// and stopped with SIGTERM.
import { spawn } from 'node:child_process';

// Starts `binary serve --port 0 ...args`; `port` resolves once it listens (at most 120 s)
// and rejects if it exits first.
export function startServer(binary, args) {
  const child = spawn(binary, ['serve', '--port', '0', ...args],
                      { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, GPTVK_VALIDATION: '1' } });
  child.stderrText = '';
  const port = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start: ${child.stderrText}`)), 120000);
    child.stderr.on('data', (d) => {
      child.stderrText += d;
      const m = child.stderrText.match(/gpt-vk: listening on http:\/\/127\.0\.0\.1:(\d+)\n/);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    child.on('exit', (code) => reject(new Error(`server exited (${code}): ${child.stderrText}`)));
  });
  return { child, port };
}

// Sends SIGTERM and resolves with { code: the exit code, or 'timeout' (then SIGKILL) after
// 30 s; validation: the first validation message the server printed, or null }.
export async function stopServer(child) {
  let code = child.exitCode;
  if (code === null) {
    // 'close' comes after the last of its stderr, 'exit' may not.
    const exited = new Promise((resolve) => child.on('close', (c) => resolve(c)));
    child.kill('SIGTERM');
    code = await Promise.race([exited, new Promise((r) => setTimeout(() => r('timeout'), 30000))]);
    if (code === 'timeout') child.kill('SIGKILL');
  }
  const message = child.stderrText.match(/gpt-vk: validation: .*/);
  return { code, validation: message ? message[0] : null };
}
