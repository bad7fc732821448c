import { ROUTES, type RouteDef } from './schemas.js';

type Schema = { properties?: Record<string, object>; required?: readonly string[] };

/**
 * The OpenAPI 3.1 document of the admin API, derived from the very schemas Fastify validates
 * with (3.1 uses JSON Schema, so they are copied as they are).
 */
export function openApiDocument(version: string): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of Object.values(ROUTES) as RouteDef[]) {
    const path = r.url.replace(/:([a-z_]+)/g, '{$1}');
    const parameters = [...params(r.schema.params, 'path'), ...params(r.schema.querystring, 'query'), ...params(r.schema.headers, 'header')];
    const responses = Object.fromEntries(
      Object.entries(r.schema.response).map(([code, schema]) => [
        code,
        // 204 has no body: the description alone.
        code === '204' ? { description: describe(204) } : { description: describe(Number(code)), content: { 'application/json': { schema } } },
      ]),
    );
    (paths[path] ??= {})[r.method.toLowerCase()] = {
      operationId: r.operationId,
      summary: r.summary,
      ...(r.public ? { security: [] } : {}),
      ...(parameters.length ? { parameters } : {}),
      ...(r.schema.body ? { requestBody: { required: true, content: { 'application/json': { schema: r.schema.body } } } } : {}),
      responses,
    };
  }
  return {
    openapi: '3.1.0',
    info: { title: 'q akerdock-worker admin API', version },
    components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
    security: [{ bearer: [] }],
    paths,
  };
}

function params(schema: object | undefined, where: 'path' | 'query' | 'header'): object[] {
  const s = schema as Schema | undefined;
  if (!s?.properties) return [];
  return Object.entries(s.properties).map(([name, prop]) => {
    const { description, ...rest } = prop as { description?: string };
    return {
      name: where === 'header' ? headerName(name) : name,
      in: where,
      required: where === 'path' || (s.required ?? []).includes(name),
      ...(description ? { description } : {}),
      schema: rest,
    };
  });
}

function headerName(lower: string): string {
  return lower.replace(/(^|-)([a-z])/g, (_m, dash: string, c: string) => dash + c.toUpperCase());
}

function describe(code: number): string {
  const text: Record<number, string> = {
    200: 'OK',
    201: 'Created',
    202: 'Accepted',
    204: 'Deleted',
    400: 'Bad request',
    401: 'No bearer token',
    403: 'Wrong bearer token',
    404: 'No such job or schedule',
    409: "Not allowed in the job's current state",
    413: 'Body too large',
    415: 'Body is not JSON',
    503: 'Not ready',
  };
  return text[code] ?? String(code);
}
