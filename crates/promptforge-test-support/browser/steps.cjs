// Drives Debian's Chromium through playwright-core for the viewer tests: reads a JSON list
// of steps, runs them in one page, prints a JSON object of what the steps read.
//
// usage: node steps.cjs <playwright-core dir> <chromium> <user-data-dir> <steps.json>
"use strict";
const [modules, executablePath, userDataDir, stepsFile] = process.argv.slice(2);
const { chromium } = require(modules);
const steps = JSON.parse(require("fs").readFileSync(stepsFile, "utf8"));

(async () => {
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath,
    headless: true,
    viewport: { width: 1400, height: 1600 },
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const out = {};
  const errors = [];
  try {
    const page = context.pages()[0] || (await context.newPage());
    page.on("pageerror", e => errors.push(String(e)));
    page.on("console", m => { if (m.type() === "error") errors.push(m.text()); });
    page.setDefaultTimeout(30000);
    for (const step of steps) {
      if (step.goto) { const t = Date.now(); await page.goto(step.goto); out[step.as || "goto_ms"] = Date.now() - t; }
      else if (step.wait) await page.locator(step.wait).first().waitFor({ state: step.state || "visible" });
      else if (step.click) await page.locator(step.click).nth(step.nth || 0).click();
      else if (step.fill) await page.locator(step.fill).fill(step.value);
      else if (step.text) out[step.as] = (await page.locator(step.text).nth(step.nth || 0).innerText()).trim();
      else if (step.texts) out[step.as] = (await page.locator(step.texts).allInnerTexts()).map(t => t.trim());
      else if (step.attr) out[step.as] = await page.locator(step.attr).first().getAttribute(step.name);
      else if (step.count) out[step.as] = await page.locator(step.count).count();
      else if (step.screenshot) await page.screenshot({ path: step.screenshot, fullPage: !!step.full, clip: step.clip });
      else if (step.eval) out[step.as] = await page.evaluate(step.eval);
      else if (step.signal) require("fs").writeFileSync(step.signal, "1");
      else throw new Error("unknown step " + JSON.stringify(step));
    }
  } catch (e) {
    errors.push(String(e && e.stack || e));
  } finally {
    await context.close();
  }
  out.errors = errors;
  process.stdout.write(JSON.stringify(out));
})();
