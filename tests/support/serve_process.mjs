// `gpt-vk serve` as a child process for the node tests (tests/*.mjs): started on a free
// loopback port, its port read from the "listening on" line, and stopped with SIGTERM.
import { spawn } from 'node:child_process';

// Starts `binary serve --port 0 ...args`; `port` resolves once it listens (at most 120 s)
// and rejects if it exits first.
export function startServer(binary, args) {
  const child = spawn(binary, ['serve', '--port', '0', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  const port = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start: ${err}`)), 120000);
    child.stderr.on('data', (d) => {
      err += d;
      const m = err.match(/gpt-vk: listening on http:\/\/127\.0\.0\.1:(\d+)\n/);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    child.on('exit', (code) => reject(new Error(`server exited (${code}): ${err}`)));
  });
  return { child, port };
}

// Sends SIGTERM and resolves with the exit code, or 'timeout' (then SIGKILL) after 30 s.
export async function stopServer(child) {
  if (child.exitCode !== null) return child.exitCode;
  const exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  child.kill('SIGTERM');
  const code = await Promise.race([exited, new Promise((r) => setTimeout(() => r('timeout'), 30000))]);
  if (code === 'timeout') child.kill('SIGKILL');
  return code;
}
